"""The write journal: a write's intent before it runs, its receipt after (see `stage`)."""
