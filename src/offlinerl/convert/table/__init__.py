"""Own step logs (CSV, parquet, JSON lines) -> episode dataset, mapped by a spec (``offlinerl convert table``).

``spec`` is the spec file, ``rows`` reads files into typed step rows, ``infer`` infers the spaces (and
refuses agents that differ), ``episodes`` builds one episode per group (episode, or episode and agent),
``convert`` is the driver, ``export`` writes a dataset back out as a step table (with its spec),
``command`` is the sub-command.
"""
