"""Own step logs (CSV, parquet, JSON lines) -> episode dataset, mapped by a spec (``offlinerl convert table``).

``spec`` is the spec file, ``rows`` reads files into typed step rows, ``episodes`` builds one episode per
group, ``convert`` is the driver, ``export`` writes a dataset back out as a step table (with its spec),
``command`` is the sub-command.
"""
