"""Helper kits shared by the tests (imported as ``kits.<name>``; pyproject's
``pythonpath`` puts ``tests/`` on ``sys.path``).  None of them holds a test.

* ``framekit`` -- build frame logs and forge frames with chosen, even invalid,
  fields (the frame codec tests).
* ``strategies`` -- Hypothesis strategies: payload batches, valid logs and the
  damage they suffer (property and differential tests).
* ``tamper`` -- change a store the way a careless tool could: raw connections
  with the triggers off, frame bit flips, raw rows and file bytes.
* ``vfs_faults`` -- a fault-injecting SQLite VFS (I/O errors, full disk,
  power loss that drops unsynced writes).
* ``powerloss_sim`` -- the power-loss loop over ``vfs_faults`` (the power-loss
  test and ``tests/soak/powerloss_soak.py``).
* ``crashkit`` -- kill -9 a writer mid-append and check the reopened store
  against a model (the crash test and ``tests/soak/crash_soak.py``);
  ``crash_child`` is its child: the workload it writes and how it reports.
* ``damagekit`` -- byte damage to a closed store file and who it can hurt
  (the random-damage test).
* ``racekit`` -- writers and readers racing on one store, in threads and child
  processes (the concurrency integrity test).
* ``replaykit`` -- the fixed replay set and the scripted model that answered
  it (the replay test and ``tests/data/replay/make_set.py``).
* ``pgstores`` -- the suite's PostgreSQL run (``TRAJLOG_TEST_DB=postgresql``): the run's
  cluster and the redirect of every store path to a tenant of it; ``pgsite/`` carries the
  redirect into child processes (its ``sitecustomize``).
* ``costkit`` -- deterministic counters of what a store's operations cost
  SQLite (statements, VM steps, pages, compiles, authorizer callbacks, chunk
  bytes written) and the workloads they run (the guards in ``tests/cost/``).
"""
