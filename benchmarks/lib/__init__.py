"""The benchmarks' library: what every experiment (a module of ``benchmarks``) may use.

* :mod:`benchmarks.lib.tasks`: the tasks (ResNet on the embedded images, Transformer on
  the embedded text), their pipelines' settings and their iterators' lifecycles;
* :mod:`benchmarks.lib.training`, :mod:`benchmarks.lib.replay`,
  :mod:`benchmarks.lib.wallclock`: training to a target, the modelled-accelerator replay
  and real training on this CPU;
* :mod:`benchmarks.lib.models`: the models;
* :mod:`benchmarks.lib.results_io`: results files (written and read here only);
* :mod:`benchmarks.lib.reporting`, :mod:`benchmarks.lib.plots`: tables and figures;
* :mod:`benchmarks.lib.step_times`, :mod:`benchmarks.lib.progress`: step-time
  statistics and training progress per step.

No module here imports an experiment (``tests/test_layout.py``).
"""
