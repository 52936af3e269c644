from eventckpt.cli import main

main(prog_name="eventckpt")
