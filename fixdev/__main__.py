from fixdev.interfaces.cli import main

main()
