"""eventsourcing 9.5.6's own recorder test cases (``eventsourcing/tests/
persistence.py`` and ``tests/application.py``, shipped in its wheel) against
the trajlog recorders: each case subclassed, ``create_recorder()`` giving a
recorder on a fresh trajlog store file."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from eventsourcing.tests import application as app_cases
from eventsourcing.tests import persistence as cases
from eventsourcing.utils import Environment, get_topic

import trajlog
from trajlog.adapters.eventsourcing import (
    TrajlogAggregateRecorder,
    TrajlogApplicationRecorder,
    TrajlogFactory,
    TrajlogProcessRecorder,
    TrajlogTrackingRecorder,
)


class _Stores:
    """A fresh store file per test, closed and removed after it."""

    def setUp(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="trajlog-es-")
        self._stores: list[trajlog.Store] = []
        super().setUp()  # type: ignore[misc]

    def tearDown(self) -> None:
        super().tearDown()  # type: ignore[misc]
        for store in self._stores:
            store.close()
        shutil.rmtree(self._dir, ignore_errors=True)

    def store(self) -> trajlog.Store:
        path = os.path.join(self._dir, f"s{len(self._stores)}.db")
        store = trajlog.open(path, durability=os.environ.get("TRAJLOG_DURABILITY", "full"))
        self._stores.append(store)
        return store


class TestAggregateRecorder(_Stores, cases.AggregateRecorderTestCase):
    def create_recorder(self) -> TrajlogAggregateRecorder:
        return TrajlogAggregateRecorder(self.store())


class TestApplicationRecorder(_Stores, cases.ApplicationRecorderTestCase):
    def create_recorder(self) -> TrajlogApplicationRecorder:
        return TrajlogApplicationRecorder(self.store())

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


class TestTrackingRecorder(_Stores, cases.TrackingRecorderTestCase):
    def create_recorder(self) -> TrajlogTrackingRecorder:
        return TrajlogTrackingRecorder(self.store())


class TestProcessRecorder(_Stores, cases.ProcessRecorderTestCase):
    def create_recorder(self) -> TrajlogProcessRecorder:
        return TrajlogProcessRecorder(self.store())


class TestNonInterleavingNotificationIDs(_Stores, cases.NonInterleavingNotificationIDsBaseCase):
    def create_recorder(self) -> TrajlogApplicationRecorder:
        return TrajlogApplicationRecorder(self.store())


class _TrackingSubclass(TrajlogTrackingRecorder):
    pass


class TestFactory(cases.InfrastructureFactoryTestCase[TrajlogFactory]):
    def setUp(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="trajlog-es-")
        self.env = Environment("TestCase", {
            TrajlogFactory.PERSISTENCE_MODULE: "trajlog.adapters.eventsourcing",
            TrajlogFactory.TRAJLOG_DBNAME: os.path.join(self._dir, "factory.db")})
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        shutil.rmtree(self._dir, ignore_errors=True)

    def expected_factory_class(self) -> type[TrajlogFactory]:
        return TrajlogFactory

    def expected_aggregate_recorder_class(self) -> type[Any]:
        return TrajlogAggregateRecorder

    def expected_application_recorder_class(self) -> type[Any]:
        return TrajlogApplicationRecorder

    def expected_tracking_recorder_class(self) -> type[Any]:
        return TrajlogTrackingRecorder

    def tracking_recorder_subclass(self) -> type[Any]:
        return _TrackingSubclass

    def expected_process_recorder_class(self) -> type[Any]:
        return TrajlogProcessRecorder


class TestExampleApplication(app_cases.ExampleApplicationTestCase):
    """The library's example application (snapshots included) on trajlog."""

    expected_factory_topic = get_topic(TrajlogFactory)

    def setUp(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="trajlog-es-")
        self._env = {"PERSISTENCE_MODULE": "trajlog.adapters.eventsourcing",
                     "TRAJLOG_DBNAME": os.path.join(self._dir, "app.db")}
        self._saved = {k: os.environ.get(k) for k in self._env}
        os.environ.update(self._env)
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        for k, v in self._saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self._dir, ignore_errors=True)


# the abstract bases, imported above, are not collected
del cases, app_cases
