import logging

import gevent
import pytest


class Recorder(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record)


@pytest.fixture(autouse=True)
def no_nsqbox_warnings():
    """nsqbox logs no warning during a test that uses only documented calls."""
    recorder = Recorder()
    logger = logging.getLogger("nsqbox")
    logger.addHandler(recorder)
    yield
    logger.removeHandler(recorder)
    assert [r.getMessage() for r in recorder.records] == []


@pytest.fixture
def gevent_hub():
    yield
    gevent.get_hub().destroy(destroy_loop=True)
