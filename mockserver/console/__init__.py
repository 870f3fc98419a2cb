"""The console: a page the server serves at ``/__mockserver/console`` to look at what the app
sent and got, live — the journal's entries listed and filtered, one opened (its body, its
answer folded, a stream's timeline), a session's trajectory, and the server's rules, faults,
sessions, cassettes and metrics. It reads the journal and the state and changes neither; the
routes (:mod:`mockserver.routes.console`) guard it with the admin rule.
"""
