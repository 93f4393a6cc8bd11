"""Guards on the *shape* of the cost: deterministic counters (statements,
trigger programs, VM steps, pages, authorizer callbacks, statement compiles,
bytes a repack rewrites, query plans) and the ratios of those counters between
a small and a large log.  No clock anywhere: they hold on a noisy 2-core
machine, and a regression to more statements, a recompile at every execute, a
table scan or a cost that grows with the log fails them.  Wall-clock speed is
measured in ``benchmarks/``.  The counters are in ``kits/costkit.py``; each
limit is today's measured value (the planned leaner paths lower them: lower
the limit with the change that lowers the cost), and every guard is shown to
fail on a planted regression."""
