"""The three ways in: `ResilientToolNode`, `ResilientTool`, the middleware."""
