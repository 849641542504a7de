"""codemode's worker package: the code that runs inside the worker process.

It imports only the standard library and itself, so it starts fast and can be mounted
alone, read-only, inside a sandbox.
"""
