"""Save and train: a knowledge base's own learned model (``adapter``), fitted on what the project holds."""
