"""Names kept from the seed systems (py-code-mode, code-execution-mcp) for users moving over.

``codemode serve`` (``--tools all``) lists ``list_available_tools`` and
``get_server_tools``; ``search_tools`` accepts ``max_results``; ``get_state`` and
``save_state`` take ``state_file`` and answer the seeds' shapes beside codemode's own;
``codemode.server.create_server`` takes ``custom_tools`` and ``config``. See
docs/coming-from-seeds.md.
"""
