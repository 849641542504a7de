"""Host-side isolation: what protects the host from what the sandbox leaves behind.

- :mod:`.sweep` walks a sandbox-writable tree after each run without following anything
  the sandbox could swap in (setuid/setgid bits stripped, bytes and files counted for the
  workspace quota);
- :mod:`.jail` builds the launch line of a bubblewrap jail for host-side helpers that must
  touch sandbox-written data (pip for ``deps.add``, upstream MCP servers given a workspace
  path), started as a dedicated unprivileged uid (:mod:`.uids`);
- :mod:`.servers` turns an upstream stdio server's configuration into its jailed launch;
- :mod:`.acl` shares a workspace directory between the sandbox's uid and a server's uid.
"""
