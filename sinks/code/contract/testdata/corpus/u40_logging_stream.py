# Logging to a stream the reader does not follow.
import logging
import os

logging.basicConfig(stream=os.fdopen(3, "w"))
logging.warning('{"provider":"erp","method":"DELETE","path":"/x"}')
