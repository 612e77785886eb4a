from synclab.cli import main

main()
