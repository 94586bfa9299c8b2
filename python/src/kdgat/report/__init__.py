"""The run report: ``python -m kdgat.report --input FILE --out DIR`` (run by ``kdgat-runner report``)."""
