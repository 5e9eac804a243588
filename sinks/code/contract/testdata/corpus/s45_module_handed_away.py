# Soundness probe: a module handed to a standard function, which hands it back as run-time data.
import os, statistics
statistics.mode([os]).system("curl -X DELETE https://erp.example/x")
