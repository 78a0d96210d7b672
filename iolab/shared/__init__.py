"""What two or more experiments share, below them: the experiments are plugins and never
import one another (``tests/test_layout.py`` holds that), so a part of one that another uses
lives here.

- :mod:`~iolab.shared.gpu_io`: the GPU experiments' settings, metrics, collectors, imported
  rows and the parts their chapters share;
- :mod:`~iolab.shared.cuda_run`: what the two device-initiated experiments (``cuda_iosize``,
  ``cuda_qdepth``) share: xnvmeperf cuda-run, their variables and analysis fields;
- :mod:`~iolab.shared.gpu_sources`: where a device-initiated chapter takes its device
  capacity, link term and GPU-to-GPU reference from (another experiment's campaign, named in
  the params, or a published reference);
- :mod:`~iolab.shared.tool_ratios` and :mod:`~iolab.shared.tool_bars`: the tool comparison's
  runs, ratios, published table and bars, as its own chapter and the CPU-initiated one show
  them.

This layer sits above the report and below the experiments: it may load a campaign and draw,
where :mod:`iolab.analysis` (statistics over the tables it is given) may not.

Responsible for: those shared parts. Not responsible for: any one experiment's variables,
findings or wording (its package under ``iolab.experiments``), statistics that know no
experiment (``iolab.analysis``), or finding experiments (``iolab.core.registry``).
"""
