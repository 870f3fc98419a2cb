# mockserver with its reference model, no torch (docs/docker.md).
#   Build: docker build -t mockserver .
#   Run:   docker run --rm -p 4010:4010 mockserver
#          docker run --rm -p 4010:4010 -e MOCKSERVER_SEED=7 mockserver serve --faults 'http.503@p=0.1'
FROM python:3.11-slim
WORKDIR /app
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
COPY pyproject.toml setup.py README.md ./
COPY mockserver ./mockserver
# The model's C kernel (mockserver/gpt/kernels) is compiled as the package installs; the
# compiler is gone again by the end of the same layer. (Without it the NumPy kernel would
# answer: the same bytes, several times slower.)
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && pip install . \
    && apt-get purge -y gcc libc6-dev && apt-get autoremove -y && rm -rf /var/lib/apt/lists/*
# Not root; /data is a writable place for cassettes and a sqlite store.
RUN useradd --create-home --uid 1000 mockserver && mkdir -p /data && chown mockserver /data
USER mockserver
# Host and port as environment rather than flags: flags win over the environment, so
# `-e MOCKSERVER_PORT=…` and `docker run … mockserver serve --seed 7` both still work.
ENV MOCKSERVER_HOST=0.0.0.0 MOCKSERVER_PORT=4010
EXPOSE 4010
# /health answers from the event loop alone, even while the model loads. The slim image has
# no curl, so Python asks.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 CMD \
    python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ['MOCKSERVER_PORT'], timeout=2)"
# `docker run mockserver` serves; `docker run mockserver cassettes check /data` runs the other command.
ENTRYPOINT ["mockserver"]
CMD ["serve"]
