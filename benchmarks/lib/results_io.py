"""Writing benchmark results as JSON with the machine, versions and settings they came from."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import enum
import typing
import fcntl
import functools
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any, Callable, Hashable, Optional

# The form of a results document. 2: measurements shared by records are lists of
# ``{"of": {fields}, "value": ...}``, found by their fields (1 keyed them by strings such as
# "resnet/R=4"). 3: settings are fields, never labels (an AutoEcho run's max_factor, a
# throughput configuration's name and factor). 4: the main job's runs are a list of
# records with their fields (3 keyed them by name, "AutoEcho" giving its max_factor as
# factor). An older file is refused: run its benchmark again (the migration command
# went once every committed file was at 4: docs/decisions/0005-benchmarks-library-and-experiments.md).
# 5: the controller's decisions are records (step, factor, previous factor, phase, cause,
# reason), not sentences; an AutoEcho run holds its training as one record and reads what
# the controller chose from its saved timeline; the main job's runs hold their RunConfig
# and training. The time-to-target files were rewritten once, each sentence parsed into
# its record and checked against the timeline it came from; the other files' layout did
# not change.
SCHEMA_VERSION = 5

# The committed results, regenerated only by the commands the README names for them
# (each passes ``--output-dir benchmarks/results``).
RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"

# Where a user's runs go by default: relative to the working directory, ignored by git.
RUNS_DIR = Path("runs")


class Record:
    """A frozen dataclass that a results file holds: ``record()`` writes it, ``from_record()`` reads it.

    Enum fields are written as their values and read back as the enum; tuples as lists
    and read back as tuples; a field that is itself a ``Record`` as its record. Reading
    refuses a record that lacks a field, naming it (no silent default). The one exception
    is a field a class names in ``OMITTED_WHEN_NONE``: one that older files lack (the host
    a run was stamped with, say), read as ``None`` when absent and left out when ``None``,
    so that such a file reads back exactly.

    >>> @dataclasses.dataclass(frozen=True)
    ... class Run(Record):
    ...     ratios: tuple
    ...     seconds: float
    >>> Run((2.0, 4.0), 1.5).record()
    {'ratios': [2.0, 4.0], 'seconds': 1.5}
    >>> Run.from_record({"ratios": [2.0, 4.0], "seconds": 1.5}) == Run((2.0, 4.0), 1.5)
    True
    >>> Run.from_record({"ratios": [2.0, 4.0]})
    Traceback (most recent call last):
    ...
    ValueError: Run: the record has no field 'seconds'; it has ['ratios']
    """

    OMITTED_WHEN_NONE: typing.ClassVar[tuple[str, ...]] = ()
    # Properties written beside the fields for whoever reads the file (R from the rates
    # that make it, say); reading checks that they still follow from the fields.
    WRITTEN_PROPERTIES: typing.ClassVar[tuple[str, ...]] = ()

    def record(self) -> dict:
        written = {field.name: _written(getattr(self, field.name)) for field in dataclasses.fields(self)
                   if not (field.name in self.OMITTED_WHEN_NONE and getattr(self, field.name) is None)}
        return {**written, **{name: getattr(self, name) for name in self.WRITTEN_PROPERTIES}}

    @classmethod
    def from_record(cls, record: dict):
        if not isinstance(record, dict):
            raise ValueError(f"{cls.__name__}: expected a record (a dict), got {type(record).__name__}: {record!r:.200}")
        names = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(record) - names - set(cls.WRITTEN_PROPERTIES))
        if unknown:
            raise ValueError(f"{cls.__name__}: the record has fields this code does not know, {unknown}; "
                             f"its fields are {sorted(names)}")
        fields = [field for field in dataclasses.fields(cls)
                  if field.name in record or field.name not in cls.OMITTED_WHEN_NONE]
        for field in fields:
            if field.name not in record:
                raise ValueError(f"{cls.__name__}: the record has no field {field.name!r}; it has {sorted(record)}")
        hints = _hints(cls)
        read = cls(**{field.name: _read(hints.get(field.name), record[field.name]) for field in fields})
        for name in cls.WRITTEN_PROPERTIES:
            if name in record and record[name] != getattr(read, name):
                raise ValueError(f"{cls.__name__}: the record's {name} is {record[name]!r}, but its fields make it "
                                 f"{getattr(read, name)!r}")
        return read


def fields_of(record: Record) -> dict:
    """A record's fields by name, their values as they are (nested records stay records)."""
    return {field.name: getattr(record, field.name) for field in dataclasses.fields(record)}


def typed(document: dict, settings: type, results: type) -> tuple:
    """A results document's settings and results as :class:`Record` s: the one place their keys are read.

    ``settings`` and ``results`` are ``Record`` classes, or types of them such as
    ``dict[str, SomeRecord]`` (results keyed by a name).

    >>> @dataclasses.dataclass(frozen=True)
    ... class Counts(Record):
    ...     fresh: int
    >>> typed({"settings": {"fresh": 1}, "results": {"fresh": 2}}, Counts, Counts)
    (Counts(fresh=1), Counts(fresh=2))
    """
    return _read(settings, document["settings"]), _read(results, document["results"])


def _written(value):
    if isinstance(value, Record):
        return value.record()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (tuple, list)):
        return [_written(v) for v in value]
    if isinstance(value, dict):
        return {k: _written(v) for k, v in value.items()}
    return value


# Once a class: get_type_hints evaluates every annotation anew, and the README's tables read
# some 125,000 records (their check in tests/test_readme.py took 55 s with it uncached, 20 s cached).
_hints = functools.lru_cache(maxsize=None)(typing.get_type_hints)


def _read(kind, value):
    if value is None or kind is None:
        return value
    origin = typing.get_origin(kind)
    if origin is typing.Union:
        options = [k for k in typing.get_args(kind) if k is not type(None)]
        return _read(options[0], value) if len(options) == 1 else value
    if origin is tuple or kind is tuple:
        args = [a for a in typing.get_args(kind) if a is not Ellipsis]
        return tuple(_read(args[0] if args else None, v) for v in value)
    if origin is list:
        args = typing.get_args(kind)
        return [_read(args[0] if args else None, v) for v in value]
    if origin is dict:
        args = typing.get_args(kind)
        return {k: _read(args[1] if args else None, v) for k, v in value.items()}
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(value)
    if isinstance(kind, type) and issubclass(kind, Record):
        return kind.from_record(value)
    return value


@dataclasses.dataclass(frozen=True)
class Machine(Record):
    """The host a results file (or one of its runs) was written on (:func:`machine`)."""

    cpu: str
    cores: int
    memory_gib: Optional[float]
    os: str
    python: str


@dataclasses.dataclass(frozen=True)
class Versions(Record):
    """The versions of the libraries the figures depend on (:func:`versions`); Keras where it was installed."""

    OMITTED_WHEN_NONE = ("keras",)

    echoing: str
    tensorflow: str
    numpy: str
    keras: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Header(Record):
    """What every results document says of itself besides its settings and results (:func:`write_results`)."""

    schema_version: int
    benchmark: str
    created: str
    command: str
    machine: Machine
    versions: Versions


@dataclasses.dataclass(frozen=True)
class Stamp:
    """The command and host one record of a results file's ``runs`` was stamped with (``None`` where it was not)."""

    command: Optional[str]
    machine: Optional[Machine]


def header(document: dict) -> Header:
    """A results document's header."""
    return Header.from_record({field.name: document[field.name] for field in dataclasses.fields(Header)})


def stamps(document: dict) -> list[Stamp]:
    """The stamps of a results file's ``runs``, for the files that grow one run at a time (:class:`ResultsFile`); else none.

    >>> stamps({"results": {"runs": [{"command": "python -m x", "value": 1}, {"value": 2}]}})
    [Stamp(command='python -m x', machine=None), Stamp(command=None, machine=None)]
    """
    runs = document["results"].get("runs", []) if isinstance(document["results"], dict) else []
    return [Stamp(run.get("command"), Machine.from_record(run["machine"]) if "machine" in run else None)
            for run in runs if isinstance(run, dict)]


def add_output_dir_argument(parser) -> None:
    """The ``--output-dir`` option every benchmark takes, with the same default and help."""
    parser.add_argument(
        "--output-dir", type=Path, default=RUNS_DIR, metavar="DIR",
        help=f"folder for the results JSON (and plots); default: {RUNS_DIR}/, ignored by git. "
             "`--output-dir benchmarks/results` regenerates the committed results the README's tables come from")


def machine() -> dict[str, Any]:
    """What ran the benchmark: CPU, cores, memory, OS, Python."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory_gib = None
    if hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names:
        memory_gib = round(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / 2**30, 1)
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": memory_gib, "os": platform.platform(),
            "python": sys.version.split()[0]}


def this_machine() -> Machine:
    """This host, as a record (:func:`machine`)."""
    return Machine.from_record(machine())


def versions() -> dict[str, str]:
    """Versions of the libraries the figures depend on."""
    import numpy
    import tensorflow as tf

    import echoing

    found = {"echoing": echoing.__version__, "tensorflow": tf.__version__, "numpy": numpy.__version__}
    try:
        import keras

        found["keras"] = keras.__version__
    except ImportError:
        pass
    return found


def command_line() -> str:
    """The command that is running, as a person would type it (``python -m module args``)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    program = f"python -m {spec.name}" if spec is not None else f"python {Path(sys.argv[0]).name}"
    return " ".join([program] + sys.argv[1:])


def write_results(name: str, settings: dict[str, Any], results: dict[str, Any], directory: Path,
                  machine_record: Optional[dict] = None) -> Path:
    """Writes ``directory/name.json`` with machine (``machine_record``, else this one's), versions, settings, results."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    document = {
        "schema_version": SCHEMA_VERSION,
        "benchmark": name,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command_line(),
        "machine": machine_record if machine_record is not None else machine(),
        "versions": versions(),
        "settings": settings,
        "results": results,
    }
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(document, indent=2) + "\n")
    tmp.replace(path)
    return path


def read_results(path: Path) -> dict[str, Any]:
    """A results document; one in an older form is refused (run its benchmark again)."""
    document = json.loads(Path(path).read_text())
    version = document.get("schema_version", 1)
    if version != SCHEMA_VERSION:
        raise ValueError(f"{path}: results in schema version {version}, this code reads {SCHEMA_VERSION}; "
                         f"run the benchmark that wrote it again")
    return document


class ResultsFile:
    """A results file that grows one finished record at a time, so that a long run resumes.

    Several processes may fill one file at once (say, one task each): every addition
    re-reads the file under an exclusive lock and merges, so no process overwrites
    another's records. Records are told apart by ``key(record)``, a value compared with ``==``
    (a frozen dataclass of the run's settings, say), never a string made to be parsed back.

    Example:

    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "runs.json"
    >>> results = ResultsFile(path, {"what": "example"}, key=lambda record: record["config"])
    >>> results.add({"config": 1, "value": 0.5})
    >>> results.done(1), ResultsFile(path, {}, key=lambda record: record["config"]).done(1)
    (True, True)
    """

    def __init__(self, path: Path, settings: Optional[dict], *, key: Callable[[dict], Hashable]):
        self.path = Path(path)
        self.settings = settings  # None: the file's own, as it was written
        self._file_settings: dict = {}
        self._file_machine: Optional[dict] = None  # the header's: the machine of the file's last write
        self.key = key
        self.runs: list[dict] = []
        self.extra: dict = {}
        self._reload()

    def _reload(self) -> None:
        if not self.path.exists():
            return
        document = read_results(self.path)
        self._file_settings = document["settings"]
        self._file_machine = document["machine"]
        self.runs = document["results"]["runs"]
        mine, self.extra = self.extra, {k: v for k, v in document["results"].items() if k != "runs"}
        for name, value in mine.items():
            if _is_measurements(value) and _is_measurements(self.extra.get(name)):
                # Measurements both processes made: the file's, and this one's it lacks.
                self.extra[name] = self.extra[name] + [m for m in value if _find(self.extra[name], m["of"]) is None]
            else:
                self.extra[name] = value

    def done(self, key: Hashable) -> bool:
        return any(self.key(record) == key for record in self.runs)

    def add(self, record: dict) -> None:
        """Adds (or replaces) one record, stamped with the machine it ran on, and writes the file.

        The file's header names the machine of its last write; the stamp keeps each
        record's own, as a file filled over several sessions may span machines.
        """
        record = {**record, "machine": record.get("machine", machine())}
        with self._locked():
            self._reload()
            self.runs = [r for r in self.runs if self.key(r) != self.key(record)]
            self.runs.append(record)
            self._save()

    def save_extra(self, name: str, value: Any) -> None:
        """Sets the file-wide entry ``name`` (a summary of the records, say) and writes the file."""
        with self._locked():
            self._reload()
            self.extra[name] = value
            self._save()

    def measure_once(self, name: str, of: dict, measure: Callable[[], Any]) -> Any:
        """The measurement ``name`` of ``of`` (fields, say ``{"task": "resnet", "ratio": 4.0}``): the saved one, or
        ``measure()``'s, saved at once for every later run.

        Measurements are shared by records (a pipeline's rate for every run at its R, a
        timed replay a later invocation trains on); they live in the file's list ``name``
        as ``{"of": of, "value": value}``, found by their fields.
        """
        found = _find(self.extra.get(name, []), of)
        if found is not None:
            return found["value"]
        value = measure()
        with self._locked():
            self.extra.setdefault(name, []).append({"of": of, "value": value})
            self._reload()
            self._save()
        return value

    def revise_measurements(self, name: str, revise: Callable[[dict, Any], Optional[Any]], *,
                            key_of: Callable[[dict], Hashable]) -> list[dict]:
        """Rewrites the measurements ``name``: ``revise(of, value)`` gives the value to keep, or None to drop it.

        The records whose key is ``key_of(of)`` of a dropped measurement go with it, so
        that the next run measures it again and redoes them. Returns the dropped ``of`` s.
        """
        with self._locked():
            self._reload()
            kept, dropped = [], []
            for measurement in self.extra.get(name, []):
                value = revise(measurement["of"], measurement["value"])
                if value is None:
                    dropped.append(measurement["of"])
                else:
                    kept.append({"of": measurement["of"], "value": value})
            gone = [key_of(of) for of in dropped]
            self.runs = [record for record in self.runs if self.key(record) not in gone]
            self.extra[name] = kept
            self._save(measured=False)
        return dropped

    def machine_of(self, record: dict) -> Machine:
        """The machine a record was stamped with; an unstamped one's is the file header's (its last measuring write's)."""
        if "machine" in record:
            return Machine.from_record(record["machine"])
        return header(read_results(self.path)).machine if self.path.exists() else this_machine()

    def drop(self, drops: Callable[[dict, Machine], bool]) -> list[dict]:
        """Removes the records for which ``drops(record, the machine it ran on)`` holds; returns them.

        The next run then redoes them.
        """
        with self._locked():
            self._reload()
            dropped = [record for record in self.runs if drops(record, self.machine_of(record))]
            self.runs = [record for record in self.runs if record not in dropped]
            self._save(measured=False)
        return dropped

    def _save(self, measured: bool = True) -> None:
        """Writes the file, its header naming this machine, or where nothing was ``measured``, the one it named.

        Unstamped records go by the header's machine, which a write that only drops or relabels must not move.
        """
        settings = self.settings if self.settings is not None else self._file_settings
        write_results(self.path.stem, settings, {"runs": self.runs, **self.extra}, self.path.parent,
                      machine_record=None if measured else self._file_machine)

    @contextlib.contextmanager
    def _locked(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _is_measurements(value) -> bool:
    return isinstance(value, list) and all(isinstance(m, dict) and set(m) == {"of", "value"} for m in value)


def _find(measurements: list, of: dict) -> Optional[dict]:
    return next((m for m in measurements if m["of"] == of), None)
