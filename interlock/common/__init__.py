"""The shared ground of the compiler, the runtime and the diff: the provider kinds, name patterns, key
hashes, vendors and their hosts, environment names, shipped files, the header rules, the packing rule,
the bounds on numbers a server reports, and the collector's pause. Imports nothing else of interlock."""


def words(text: str) -> tuple[str, ...]:
    """The names of a table written as words, a line of them at a time (one name a line, the tables of
    names in ``envnames`` and ``headers`` would be 280 lines)."""
    return tuple(text.split())
