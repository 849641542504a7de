from codemode.cli import main

main()
