from kubesched.launch import main

main()
