from kubesched.cli import main

main()
