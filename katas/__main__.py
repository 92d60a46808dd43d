from katas.cli import main

main()
