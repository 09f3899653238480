"""Runs one Triton QA test file for scripts/triton_qa.py, in the suite's folder.

Usage (from the copied qa/L0_x folder): triton_qa_driver.py RESULTS.jsonl FILE.py [Class.test ...]
Imports the test file as test.sh's `python FILE.py [names]` would run it, with
qa/common on the path, and records one JSON line per case in RESULTS.jsonl.
test_util's validators for TensorRT, PyTorch, OpenVINO and ensembles answer
False, so mixed cases run their ONNX part only (docs/triton-qa.md).
"""
import json
import os
import sys
import unittest
from pathlib import Path


class RecordingResult(unittest.TextTestResult):
    """Writes one JSON line per finished case (survives a suite timeout)."""

    def __init__(self, out, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.out = out
        self.failed_by_subtest = set()

    def _record(self, test, outcome, detail=""):
        self.out.write(json.dumps({"id": short_id(test.id()), "outcome": outcome,
                                   "detail": detail[-3000:]}) + "\n")
        self.out.flush()

    def startTest(self, test):
        super().startTest(test)
        INFER_CALLS[0] = 0

    def addSuccess(self, test):
        super().addSuccess(test)
        if INFER_CALLS[0] == 0 and INFER_CALLS[1]:
            self._record(test, "excluded", "no ONNX model has this case's types: it sent "
                                           "no inference (every other backend's part left out)")
        else:
            self._record(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "failed", self._exc_info_to_string(err, test))

    def addSubTest(self, test, subtest, err):
        """A failing subTest fails its case (unittest then reports no success)."""
        super().addSubTest(test, subtest, err)
        if err is not None and test.id() not in self.failed_by_subtest:
            self.failed_by_subtest.add(test.id())
            self._record(test, "failed", f"{subtest.id()}\n{self._exc_info_to_string(err, test)}")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skipped", reason)


def short_id(test_id: str) -> str:
    return ".".join(test_id.split(".")[-2:])


INFER_CALLS = [0, False]  # infer_util calls in the running case; module uses infer_util


def count_infer_util_calls(test_module):
    """With TRITON_QA_COUNT_INFER=1 (the L0_infer* suites), wraps infer_util's
    infer_* helpers, through which every inference of those suites' cases goes,
    so a case that ran none is not counted as passed."""
    iu = sys.modules.get("infer_util")
    if os.environ.get("TRITON_QA_COUNT_INFER") != "1" or iu is None \
            or not any(v is iu for v in vars(test_module).values()):
        return
    INFER_CALLS[1] = True
    for name in [n for n in vars(iu) if n.startswith("infer_") and callable(getattr(iu, n))]:
        def counted(*args, _inner=getattr(iu, name), **kwargs):
            INFER_CALLS[0] += 1
            return _inner(*args, **kwargs)
        setattr(iu, name, counted)


def driver_main(argv: list) -> int:
    """Runs in the copied suite directory: imports the test file as test.sh's
    `python file.py [names]` would, with the non-ONNX validators answering False."""
    out_path, test_file, names = argv[0], argv[1], argv[2:]
    sys.path[:0] = [os.getcwd(), str(Path("../common").resolve())]
    import test_util as tu
    for validator in ("validate_for_trt_model", "validate_for_libtorch_model",
                      "validate_for_openvino_model", "validate_for_ensemble_model"):
        setattr(tu, validator, lambda *a, **k: False)
    module = __import__(Path(test_file).stem)
    count_infer_util_calls(module)
    loader = unittest.TestLoader()
    suite = loader.loadTestsFromNames(names, module) if names else loader.loadTestsFromModule(module)
    with open(out_path, "a") as out:
        runner = unittest.TextTestRunner(
            verbosity=2, resultclass=lambda *a, **k: RecordingResult(out, *a, **k))
        runner.run(suite)
    return 0


if __name__ == "__main__":
    sys.exit(driver_main(sys.argv[1:]))
