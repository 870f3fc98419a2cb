"""Google's Gemini API (``generateContent`` and its siblings) over the one engine."""
