"""Everything the model reads: classification, the envelope, redaction, cuts, wording."""
