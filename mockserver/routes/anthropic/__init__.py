"""Anthropic's Messages API over the spine: the codec (:mod:`.codec`), the folded message
(:mod:`.message`) and its stream (:mod:`.stream`), server-side threads (:mod:`.threads`) and the
endpoints (:mod:`.endpoints`)."""
