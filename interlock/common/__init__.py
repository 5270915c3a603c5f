"""The shared ground of the compiler, the runtime and the diff: the provider kinds, name patterns, key
hashes, vendors and their hosts, environment names, shipped files, the header rules, the packing rule,
the bounds on numbers a server reports, and the collector's pause. Imports nothing else of interlock."""
