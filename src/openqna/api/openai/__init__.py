"""OpenAI's Files, Answers, Search and Vector Stores APIs."""
