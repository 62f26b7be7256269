# chmod and test -x
printf '#!/bin/bash\necho hi\n' > run.sh
[ -x run.sh ] || echo "not executable"
chmod +x run.sh
[ -x run.sh ] && echo "executable now"
