from pgq_exporter.cli import main

raise SystemExit(main())
