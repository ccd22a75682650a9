"""Who may hold a stream: admission, the token's deadline across workers, live reconfiguration."""
