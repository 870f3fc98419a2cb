"""Benchmarks for mockserver: serving throughput and latency, start-up, import, model cost.

Run ``python bench/serving.py`` (or ``make bench``); see ``bench/README.md``.
"""
