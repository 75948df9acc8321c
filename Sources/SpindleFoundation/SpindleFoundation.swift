import Foundation
import Spindle
