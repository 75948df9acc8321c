import Spindle
