"""Guard adapters: one small module per agent framework, each importing its framework lazily (only
inside the module) and calling only the :class:`~spanassert.live.guard.Guard` API."""
