"""Every committed results file reads back, through its records, to exactly what it holds."""

import pytest

from benchmarks import (backends, controller_sweep, critical_batch, demo, grain_echo, service, service_processes,
                        shapes_baselines, text_reservoir, throughput, torch_time_to_target, xla_check)
from benchmarks.lib import results_io, run_records

# A results file's name, and its settings' and results' record types.
RECORDS = {
    "backends": (backends.BackendsConfig, backends.BackendsResults),
    "controller_sweep": (controller_sweep.SweepSettings, controller_sweep.SweepResults),
    "critical_batch": (critical_batch.ExperimentSettings, critical_batch.CriticalBatchResults),
    "demo": (demo.DemoSettings, demo.DemoResults),
    "grain_echo": (grain_echo.GrainSettings, grain_echo.GrainResults),
    "service": (service.ServiceSettings, service.ServiceResults),
    "service_processes": (service_processes.Settings, service_processes.ProcessResults),
    "shapes_baselines": (shapes_baselines.BaselineConfig, shapes_baselines.BaselineResults),
    "text_reservoir": (text_reservoir.TextReservoirConfig, text_reservoir.ReservoirResults),
    "throughput": (throughput.ThroughputConfig, throughput.ThroughputResults),
    "time_to_target": (run_records.TimeToTargetSettings, run_records.TimeToTargetResults),
    "time_to_target_seeds": (run_records.TimeToTargetSettings, run_records.TimeToTargetResults),
    "torch_time_to_target": (torch_time_to_target.StudySettings, torch_time_to_target.StudyResults),
    "xla_check": (xla_check.XlaCheckConfig, dict[str, xla_check.XlaTask]),
}


def test_every_committed_results_file_has_its_records():
    assert sorted(path.stem for path in results_io.RESULTS_DIR.glob("*.json")) == sorted(RECORDS)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_a_committed_results_file_reads_back_exactly_through_its_records(name):
    document = results_io.read_results(results_io.RESULTS_DIR / f"{name}.json")
    settings, results = results_io.typed(document, *RECORDS[name])
    assert results_io.header(document).command.startswith("python -m benchmarks.")
    assert settings.record() == document["settings"]
    written = {key: value.record() for key, value in results.items()} if isinstance(results, dict) else results.record()
    assert written == document["results"]


def test_a_record_missing_a_field_or_with_one_unknown_is_refused_naming_it():
    document = results_io.read_results(results_io.RESULTS_DIR / "throughput.json")
    settings = {key: value for key, value in document["settings"].items() if key != "repeats"}
    with pytest.raises(ValueError, match="ThroughputConfig: the record has no field 'repeats'"):
        throughput.ThroughputConfig.from_record(settings)
    with pytest.raises(ValueError, match=r"ThroughputConfig: the record has fields this code does not know, \['speed'\]"):
        throughput.ThroughputConfig.from_record({**document["settings"], "speed": 1})


def test_a_written_property_must_still_follow_from_the_fields():
    document = results_io.read_results(results_io.RESULTS_DIR / "service_processes.json")
    assert service_processes.Settings.from_record(document["settings"]).ratio == document["settings"]["ratio"]
    with pytest.raises(ValueError, match="Settings: the record's ratio is 9.0, but its fields make it"):
        service_processes.Settings.from_record({**document["settings"], "ratio": 9.0})


def record_classes() -> dict[str, type]:
    """Every record class of benchmarks/ (the study modules and the library), by qualified name."""
    import dataclasses
    import importlib
    import inspect
    import pkgutil

    import benchmarks
    import benchmarks.lib

    modules = [importlib.import_module(f"benchmarks.{m.name}") for m in pkgutil.iter_modules(benchmarks.__path__)
               if m.name != "__main__"]
    modules += [importlib.import_module(f"benchmarks.lib.{m.name}") for m in pkgutil.iter_modules(benchmarks.lib.__path__)]
    return {f"{kind.__module__}.{kind.__qualname__}": kind for module in modules for kind in vars(module).values()
            if inspect.isclass(kind) and issubclass(kind, results_io.Record) and dataclasses.is_dataclass(kind)}


# What says which run a record is of, which any record of a run may carry.
IDENTITY = {"config", "target", "command", "machine", "seed"}


def test_no_record_copies_another_records_fields():
    # A record that needs another's fields derives from it or holds it (or both derive
    # from one base); two that merely share a vocabulary (steps, seconds, reached) share
    # fewer than five fields.
    import dataclasses
    import itertools

    classes = record_classes()
    assert {"benchmarks.lib.run_records.SampleRun", "benchmarks.demo.DemoRun",
            "benchmarks.lib.frontier.FrontierSummary"} <= set(classes)
    fields = {name: {f.name for f in dataclasses.fields(kind)} - IDENTITY for name, kind in classes.items()}
    copies = []
    for (a, kind_a), (b, kind_b) in itertools.combinations(classes.items(), 2):
        if issubclass(kind_a, kind_b) or issubclass(kind_b, kind_a):
            continue
        common = [base for base in kind_a.__mro__ if base in kind_b.__mro__ and dataclasses.is_dataclass(base)]
        inherited = {f.name for base in common for f in dataclasses.fields(base)}
        shared = (fields[a] & fields[b]) - inherited  # Fields both take from one base are written once.
        if len(shared) >= 5:
            copies.append((a, b, sorted(shared)))
    assert copies == []
