"""codemode's reproducible benchmarks (``codemode bench ...``).

Benchmarks print tables and write JSON; they never pass or fail on time. The token benchmark
(:mod:`codemode.bench.tokens`, scenarios in :mod:`codemode.bench.scenarios`) drives real MCP
servers, so it imports the MCP SDK; nothing in the core imports this package.
"""
