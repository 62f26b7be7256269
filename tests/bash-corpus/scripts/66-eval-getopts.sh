# eval and getopts
cmd='echo evaluated'; eval "$cmd"
parse() { local OPTIND opt; while getopts "ab:" opt; do case $opt in a) echo "flag a";; b) echo "b=$OPTARG";; esac; done; }
parse -a -b value
