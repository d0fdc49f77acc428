from gregor.cli.main import main

main()
