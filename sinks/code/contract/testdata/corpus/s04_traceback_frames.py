# Soundness probe: Traceback frames.
import traceback
for frame, line in traceback.walk_stack(None):
    frame.f_globals["gatehouse"].delete("erp", "/x")
