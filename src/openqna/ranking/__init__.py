"""A question to a confidence: the ranker, its calibrations, the KB's adaptation, follow-ups, typos."""
