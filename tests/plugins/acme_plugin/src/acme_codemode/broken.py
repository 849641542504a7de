"""A plugin whose import fails."""

raise ImportError("acme_codemode.broken needs the 'frobnicate' package")
