"""Voice: speech synthesis, audio files in and out, transcripts and Realtime sessions.

Nothing here speaks HTTP: the routes (:mod:`mockserver.routes.audio`,
:mod:`mockserver.routes.realtime`) read the wire and hand plain values in.
"""
