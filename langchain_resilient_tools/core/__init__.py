"""The vocabulary every layer shares: errors, policies, the call, tool facts, keys."""
