"""Every committed results file reads back, through its records, to exactly what it holds."""

import pytest

from benchmarks import (backends, controller_sweep, critical_batch, demo, grain_echo, service, service_processes,
                        shapes_baselines, throughput, torch_time_to_target, xla_check)
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
