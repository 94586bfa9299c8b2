import sys

# The catalogue's commands (the job epilog's `catalogue-append`, `runs`) need no torch: answered
# before the pipeline is imported, which takes seconds.
if len(sys.argv) > 1 and sys.argv[1] in ("runs", "catalogue-append", "catalogue-compact"):
    from kdgat.catalogue.cli import main as catalogue_main

    sys.exit(catalogue_main())

from kdgat.cli import main

sys.exit(main())
