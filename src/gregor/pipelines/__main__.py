"""``python -m gregor.pipelines``: the main job (see :mod:`gregor.pipelines.runner`)."""

from gregor.pipelines.runner import main

raise SystemExit(main())
